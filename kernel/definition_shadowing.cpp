#include "definition_shadowing.hpp"

#include "cpp_text.hpp"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclContextInternals.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/Mangle.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Lex/Pragma.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Sema/Lookup.h>
#include <clang/Sema/Sema.h>

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <cctype>
#include <regex>
#include <vector>

namespace mpify_kernel {
namespace {

const char* const namespace_prefix = "__mpify_cell_";
const char* const pragma_name = "mpify_shadow_earlier";

// The cell namespace `decl` belongs to (through enums and the like), or none.
const clang::NamespaceDecl* cell_namespace_of(const clang::Decl* decl) {
    for (const clang::DeclContext* context = decl->getDeclContext(); context; context = context->getParent())
        if (const auto* space = llvm::dyn_cast<clang::NamespaceDecl>(context))
            return space->getName().starts_with(namespace_prefix) ? space->getCanonicalDecl() : nullptr;
    return nullptr;
}

bool is_definition(const clang::Decl* decl) {
    if (const auto* function = llvm::dyn_cast<clang::FunctionDecl>(decl))
        return function->isThisDeclarationADefinition();
    if (const auto* tag = llvm::dyn_cast<clang::TagDecl>(decl)) return tag->isThisDeclarationADefinition();
    if (const auto* variable = llvm::dyn_cast<clang::VarDecl>(decl))
        return variable->isThisDeclarationADefinition() != clang::VarDecl::DeclarationOnly;
    if (const auto* templated = llvm::dyn_cast<clang::TemplateDecl>(decl))
        return templated->getTemplatedDecl() && is_definition(templated->getTemplatedDecl());
    return true;
}

// True when `fresh` and `earlier` are functions (or function templates) that overload
// each other: both stay visible.
bool overloads(clang::Sema& sema, const clang::NamedDecl* fresh, const clang::NamedDecl* earlier) {
    auto function_of = [](const clang::NamedDecl* decl) -> clang::FunctionDecl* {
        if (const auto* templated = llvm::dyn_cast<clang::FunctionTemplateDecl>(decl))
            return templated->getTemplatedDecl();
        return llvm::dyn_cast<clang::FunctionDecl>(const_cast<clang::NamedDecl*>(decl));
    };
    clang::FunctionDecl* fresh_function = function_of(fresh);
    clang::FunctionDecl* earlier_function = function_of(earlier);
    if (!fresh_function || !earlier_function) return false;
    if (llvm::isa<clang::FunctionTemplateDecl>(fresh) != llvm::isa<clang::FunctionTemplateDecl>(earlier)) return true;
    return sema.IsOverload(fresh_function, earlier_function, /*UseMemberUsingDeclRules=*/false);
}

// Takes `decl` out of the lookup table of `context` (the declaration itself stays, and
// what was compiled with it). The table is built first: a lazily built one would bring
// the declaration back later.
void remove_from_lookup(clang::DeclContext* context, clang::NamedDecl* decl) {
    clang::DeclContext* primary = context->getPrimaryContext();
    primary->lookup(decl->getDeclName());
    clang::StoredDeclsMap* table = primary->getLookupPtr();
    if (!table) return;
    const auto found = table->find(decl->getDeclName());
    if (found == table->end()) return;
    const clang::DeclContext::lookup_result listed = found->second.getLookupResult();
    if (std::find(listed.begin(), listed.end(), decl) != listed.end()) found->second.remove(decl);
}

// True for a declaration at global scope outside any cell: a header's (`y1` of
// <cmath>, `time`), which a cell's definition replaces as in cling.
bool is_global_from_header(const clang::NamedDecl* decl) {
    return cell_namespace_of(decl) == nullptr && decl->getDeclContext()->getRedeclContext()->isTranslationUnit();
}

// Takes a global declaration off Sema's chains of names in scope, where unqualified
// lookup at global scope finds it besides the lookup table.
void remove_from_scope(clang::Sema& sema, clang::NamedDecl* decl) {
    if (sema.TUScope) sema.TUScope->RemoveDecl(decl);
    for (auto found = sema.IdResolver.begin(decl->getDeclName()); found != sema.IdResolver.end(); ++found)
        if (*found == decl) {  // IdentifierResolver::RemoveDecl requires it there
            sema.IdResolver.RemoveDecl(decl);
            return;
        }
}

// Hides `decl` from lookups at global scope and in its cell's namespace (so that
// argument-dependent lookup does not find it either); an unscoped enum's enumerators too.
void hide(clang::Sema& sema, clang::TranslationUnitDecl* unit, clang::NamedDecl* decl) {
    remove_from_lookup(unit, decl);
    if (is_global_from_header(decl)) remove_from_scope(sema, decl);
    if (const clang::NamespaceDecl* space = cell_namespace_of(decl))
        remove_from_lookup(const_cast<clang::NamespaceDecl*>(space), decl);
    if (auto* enumeration = llvm::dyn_cast<clang::EnumDecl>(decl); enumeration && !enumeration->isScoped())
        for (clang::EnumConstantDecl* constant : enumeration->enumerators()) hide(sema, unit, constant);
}

// Hides the earlier cells' declarations of `fresh`'s name that it replaces.
void shadow_earlier(clang::Sema& sema, clang::NamedDecl* fresh) {
    if (!fresh->getDeclName() || fresh->isInvalidDecl()) return;
    clang::TranslationUnitDecl* unit = sema.getASTContext().getTranslationUnitDecl();
    clang::LookupResult earlier(sema, fresh->getDeclName(), fresh->getLocation(), clang::Sema::LookupOrdinaryName,
                                RedeclarationKind::ForVisibleRedeclaration);
    sema.LookupQualifiedName(earlier, unit);
    const clang::NamespaceDecl* fresh_cell = cell_namespace_of(fresh);
    std::vector<clang::NamedDecl*> replaced;
    for (clang::NamedDecl* candidate : earlier) {
        const clang::NamespaceDecl* cell = cell_namespace_of(candidate);
        if (candidate == fresh || cell == fresh_cell || (cell == nullptr && !is_global_from_header(candidate)) ||
            overloads(sema, fresh, candidate))
            continue;
        if (is_definition(candidate) && !is_definition(fresh)) {  // `struct A;` after `struct A {...}`
            hide(sema, unit, fresh);
            return;
        }
        replaced.push_back(candidate);
    }
    for (clang::NamedDecl* candidate : replaced) hide(sema, unit, candidate);
}

// The linker name `mangled` (a name in a cell namespace: `_ZN14__mpify_cell_16lib_fnEi`)
// would have at global scope (`_Z6lib_fni`); empty when it is not that simple shape.
std::string global_linker_name(const std::string& mangled) {
    const std::string start = "_ZN";
    std::size_t at = start.size();
    if (mangled.compare(0, at, start) != 0) return "";
    auto read_source_name = [&](std::size_t& i) -> std::string {  // <length><identifier>
        std::size_t length = 0;
        const std::size_t from = i;
        while (i < mangled.size() && std::isdigit(static_cast<unsigned char>(mangled[i])))
            length = length * 10 + static_cast<std::size_t>(mangled[i++] - '0');
        if (i == from || length == 0 || i + length > mangled.size()) return "";
        i += length;
        return mangled.substr(from, i - from);
    };
    const std::string space = read_source_name(at);
    if (space.find(namespace_prefix) == std::string::npos) return "";
    const std::string name = read_source_name(at);
    if (name.empty() || at >= mangled.size() || mangled[at] != 'E') return "";
    return "_Z" + name + mangled.substr(at + 1);
}

// A cell's declaration of a function it does not define (`int lib_fn(int);`, as
// xeus-cling users declare what a loaded library defines) lands in the cell's namespace,
// so its linker name is the namespace's, which nothing defines. When the process holds
// the function at global scope, the declaration takes that linker name: calls bind to
// the library's definition.
void bind_to_global_definition(clang::Sema& sema, clang::NamedDecl* decl) {
    auto* function = llvm::dyn_cast<clang::FunctionDecl>(decl);
    if (!function || function->isThisDeclarationADefinition() || function->hasAttr<clang::AsmLabelAttr>() ||
        function->getTemplatedKind() != clang::FunctionDecl::TK_NonTemplate ||
        llvm::isa<clang::CXXMethodDecl>(function))
        return;
    clang::ASTContext& context = sema.getASTContext();
    const std::unique_ptr<clang::MangleContext> mangler(context.createMangleContext());
    if (!mangler->shouldMangleDeclName(function)) return;
    std::string mangled;
    llvm::raw_string_ostream out(mangled);
    mangler->mangleName(clang::GlobalDecl(function), out);
    out.flush();
    const std::string global = global_linker_name(mangled);
    if (global.empty() || ::dlsym(RTLD_DEFAULT, global.c_str()) == nullptr) return;
    function->addAttr(clang::AsmLabelAttr::CreateImplicit(context, global, /*IsLiteralLabel=*/true));
}

// `#pragma mpify_shadow_earlier`, which wrap_definitions puts at the end of a run of a
// cell's definitions, inside its namespace: what the run defines hides what it replaces.
class ShadowEarlierPragma : public clang::PragmaHandler {
public:
    explicit ShadowEarlierPragma(clang::CompilerInstance& compiler)
        : clang::PragmaHandler(pragma_name), compiler_(compiler) {}

    void HandlePragma(clang::Preprocessor& preprocessor, clang::PragmaIntroducer, clang::Token& token) override {
        preprocessor.Lex(token);  // the end of the pragma: it takes no arguments
        while (token.isNot(clang::tok::eod)) preprocessor.Lex(token);
        if (!compiler_.hasSema()) return;
        clang::Sema& sema = compiler_.getSema();
        auto* space = llvm::dyn_cast<clang::NamespaceDecl>(sema.CurContext);
        if (!space || !space->getName().starts_with(namespace_prefix)) return;
        for (clang::Decl* decl : space->decls()) {
            auto* named = llvm::dyn_cast<clang::NamedDecl>(decl);
            if (!named) continue;
            bind_to_global_definition(sema, named);
            shadow_earlier(sema, named);
            if (auto* enumeration = llvm::dyn_cast<clang::EnumDecl>(named); enumeration && !enumeration->isScoped())
                for (clang::EnumConstantDecl* constant : enumeration->enumerators()) shadow_earlier(sema, constant);
        }
    }

private:
    clang::CompilerInstance& compiler_;
};

std::string opening(unsigned number) {
    return "inline namespace " + std::string(namespace_prefix) + std::to_string(number) + " { ";
}

// The ';' before the pragma ends whatever came before (a function's body): the parser is
// back at namespace scope when it reads the pragma.
std::string closing() { return " ; _Pragma(\"" + std::string(pragma_name) + "\") }"; }

// True for the line clang prints under a quoted source line: carets, tildes, spaces (and
// clang 19's margin, " | ").
bool is_caret_line(const std::string& line) {
    return line.find_first_not_of(" ^~|") == std::string::npos && line.find('^') != std::string::npos;
}

// Erases `[at, at + length)` of the quoted source `line` and, when `carets` marks that
// line, the same columns of `carets` (those it has); when `position` is the diagnostic's
// "file:line:column: " that quotes it, its column moves too.
void erase_columns(std::string& line, std::string* carets, std::string* position, std::size_t at, std::size_t length) {
    line.erase(at, length);
    if (carets && carets->size() > at) carets->erase(at, std::min(length, carets->size() - at));
    static const std::regex file_line_column(R"(^([^:\s]+:\d+:)(\d+)(: .*)$)");
    const std::size_t margin = line.find("| ");
    std::smatch match;
    if (!position || margin == std::string::npos || !std::regex_match(*position, match, file_line_column)) return;
    const std::size_t column = std::stoul(match[2]);  // 1-based, in the text clang parsed
    const std::size_t source_at = at - (margin + 2);
    if (at < margin + 2 || column <= source_at + 1) return;
    const std::size_t moved = column > source_at + length ? column - length : source_at + 1;
    *position = match[1].str() + std::to_string(moved) + match[3].str();
}

}  // namespace

std::string with_definitions_shadowing(const std::string& code, unsigned number) {
    return wrap_definitions(code, opening(number), closing());
}

std::string without_shadowing_text(const std::string& diagnostics) {
    std::vector<std::string> lines;
    for (std::size_t begin = 0; begin <= diagnostics.size();) {
        std::size_t end = diagnostics.find('\n', begin);
        if (end == std::string::npos) end = diagnostics.size();
        lines.push_back(diagnostics.substr(begin, end - begin));
        begin = end + 1;
    }
    const std::string closing_text = closing();
    const std::string opening_start = "inline namespace " + std::string(namespace_prefix);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        std::string* carets = i + 1 < lines.size() && is_caret_line(lines[i + 1]) ? &lines[i + 1] : nullptr;
        std::string* position = i > 0 ? &lines[i - 1] : nullptr;
        for (std::size_t at; (at = lines[i].find(closing_text)) != std::string::npos;)
            erase_columns(lines[i], carets, position, at, closing_text.size());
        for (std::size_t at; (at = lines[i].find(opening_start)) != std::string::npos;) {
            std::size_t end = at + opening_start.size();
            while (end < lines[i].size() && std::isdigit(static_cast<unsigned char>(lines[i][end]))) ++end;
            if (lines[i].compare(end, 3, " { ") != 0) break;
            erase_columns(lines[i], carets, position, at, end + 3 - at);
        }
    }
    std::string text;
    for (std::size_t i = 0; i < lines.size(); ++i) text += lines[i] + (i + 1 < lines.size() ? "\n" : "");
    return text;
}

void install_definition_shadowing(clang::CompilerInstance& compiler) {
    compiler.getPreprocessor().AddPragmaHandler(new ShadowEarlierPragma(compiler));
}

std::string without_cell_namespaces(std::string text) {
    const std::string prefix = namespace_prefix;
    for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
        std::size_t end = at + prefix.size();
        while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
        if (text.compare(end, 2, "::") != 0) {
            at = end;
            continue;
        }
        text.erase(at, end + 2 - at);
    }
    return text;
}

}  // namespace mpify_kernel
