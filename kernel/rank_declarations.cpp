#include "rank_declarations.hpp"

#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Interpreter/PartialTranslationUnit.h>
#include <clang/Lex/Lexer.h>

#include <algorithm>
#include <sstream>

namespace mpify_kernel {
namespace {

enum class EditKind { body_to_semicolon = 0, remove = 1, make_extern = 2 };

struct Edit {
    unsigned offset = 0, length = 0;
    EditKind kind = EditKind::remove;
    std::string name;  // the function, for the list shown to the user
};

class EditCollector {
public:
    explicit EditCollector(const clang::SourceManager& sources) : sources_(sources) {}

    void visit(clang::DeclContext* context) {
        for (clang::Decl* declaration : context->decls()) {
            if (auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(declaration)) visit(ns);
            else if (auto* linkage = llvm::dyn_cast<clang::LinkageSpecDecl>(declaration)) visit(linkage);
            else if (auto* function = llvm::dyn_cast<clang::FunctionDecl>(declaration)) visit_function(function);
            else if (auto* variable = llvm::dyn_cast<clang::VarDecl>(declaration)) visit_variable(variable);
        }
    }

    std::vector<Edit> edits;

private:
    // [begin, end] as offsets in the cell's text, when both lie in it (not in a header).
    bool offsets(clang::SourceLocation begin, clang::SourceLocation end, unsigned& from, unsigned& to) const {
        begin = sources_.getExpansionLoc(begin);
        end = sources_.getExpansionRange(end).getEnd();
        if (begin.isInvalid() || end.isInvalid() || sources_.getFileID(begin) != sources_.getFileID(end)) return false;
        if (!sources_.getBufferName(begin).starts_with("input_line_")) return false;
        from = sources_.getFileOffset(begin);
        const clang::SourceLocation after = clang::Lexer::getLocForEndOfToken(end, 0, sources_, options_);
        to = sources_.getFileOffset(after.isValid() ? after : end);
        return to >= from;
    }

    void add(clang::SourceLocation begin, clang::SourceLocation end, EditKind kind, std::string name = {}) {
        unsigned from = 0, to = 0;
        if (offsets(begin, end, from, to)) edits.push_back({from, to - from, kind, std::move(name)});
    }

    static bool compiled_into_library(const clang::FunctionDecl* function) {
        return function->doesThisDeclarationHaveABody() && !function->isInlined() && !function->isConstexpr() &&
               function->getTemplatedKind() == clang::FunctionDecl::TK_NonTemplate && function->isExternallyVisible() &&
               !function->getReturnType()->getContainedDeducedType() && !function->isDeleted() &&
               !function->isDefaulted();
    }

    void visit_function(clang::FunctionDecl* function) {
        if (!compiled_into_library(function)) return;
        if (llvm::isa<clang::CXXMethodDecl>(function)) {
            // Defined outside its class: the class already declares it.
            if (function->isOutOfLine()) add(function->getBeginLoc(), function->getEndLoc(), EditKind::remove);
            return;
        }
        const clang::Stmt* body = function->getBody();
        if (body == nullptr) return;
        add(body->getBeginLoc(), body->getEndLoc(), EditKind::body_to_semicolon, function->getQualifiedNameAsString());
    }

    void visit_variable(clang::VarDecl* variable) {
        const std::string type = variable->getType().getAsString();
        if (type.find("mpify::detail::FunctionRegistrar") != std::string::npos ||
            type.find("mpify::detail::ContextRegistrar") != std::string::npos) {
            // MPIFY_REGISTER(fn): the whole macro's text (its ';' stays, an empty declaration).
            const clang::CharSourceRange macro = sources_.getExpansionRange(variable->getSourceRange());
            add(macro.getBegin(), macro.getEnd(), EditKind::remove);
            return;
        }
        if (!variable->isExternallyVisible() || variable->isInline() || variable->isConstexpr() ||
            variable->isThisDeclarationADefinition() != clang::VarDecl::Definition ||
            variable->getDescribedVarTemplate() != nullptr || variable->isLocalVarDeclOrParm())
            return;
        if (variable->isStaticDataMember()) {
            if (variable->isOutOfLine()) add(variable->getBeginLoc(), variable->getEndLoc(), EditKind::remove);
            return;
        }
        // `T name = init` -> `extern T name`: the initializer goes (from the end of the
        // declarator to the end of the declaration) and `extern` comes first. A statement
        // that declares several variables keeps its definitions: the session then has
        // copies of its own (see docs/notebooks.md).
        const clang::SourceLocation start = variable->getBeginLoc();
        const bool shares_statement = std::any_of(edits.begin(), edits.end(), [&](const Edit& e) {
            unsigned from = 0, to = 0;
            return e.kind == EditKind::make_extern && offsets(start, start, from, to) && e.offset == from;
        });
        if (shares_statement) return;
        add(start, start, EditKind::make_extern);
        if (variable->hasInit()) {
            clang::SourceLocation declarator_end = variable->getLocation();
            if (const clang::TypeSourceInfo* written = variable->getTypeSourceInfo()) {
                const clang::SourceLocation type_end = written->getTypeLoc().getEndLoc();
                if (sources_.isBeforeInTranslationUnit(declarator_end, type_end)) declarator_end = type_end;
            }
            unsigned name_from = 0, name_to = 0, init_from = 0, init_to = 0;
            if (offsets(declarator_end, declarator_end, name_from, name_to) &&
                offsets(variable->getSourceRange().getEnd(), variable->getSourceRange().getEnd(), init_from, init_to) &&
                init_to > name_to)
                edits.push_back({name_to, init_to - name_to, EditKind::remove, {}});
        }
    }

    const clang::SourceManager& sources_;
    clang::LangOptions options_;
};

}  // namespace

std::string encode_rank_edits(clang::PartialTranslationUnit& unit, const clang::SourceManager& sources) {
    EditCollector collector(sources);
    collector.visit(unit.TUPart);
    std::ostringstream out;
    for (const Edit& edit : collector.edits)
        out << edit.offset << ' ' << edit.length << ' ' << static_cast<int>(edit.kind) << ' ' << edit.name << '\n';
    return out.str();
}

Declarations apply_rank_edits(const std::string& code, const std::string& encoded) {
    std::vector<Edit> edits;
    std::istringstream in(encoded);
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        Edit edit;
        int kind = 0;
        if (!(fields >> edit.offset >> edit.length >> kind)) continue;
        edit.kind = static_cast<EditKind>(kind);
        std::getline(fields >> std::ws, edit.name);
        if (edit.offset + edit.length <= code.size()) edits.push_back(edit);
    }
    Declarations declarations;
    for (const Edit& edit : edits)
        if (!edit.name.empty()) declarations.functions.push_back(edit.name);
    // From the end, so that earlier offsets stay right; an edit inside one already made
    // (the initializer of a removed declaration) is skipped.
    std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
        return a.offset != b.offset ? a.offset > b.offset : a.length < b.length;
    });
    std::string text = code;
    std::size_t done_from = code.size() + 1;
    for (const Edit& edit : edits) {
        if (edit.offset + edit.length > done_from) continue;
        switch (edit.kind) {
            case EditKind::body_to_semicolon: text.replace(edit.offset, edit.length, ";"); break;
            case EditKind::remove: text.replace(edit.offset, edit.length, ""); break;
            case EditKind::make_extern: text.insert(edit.offset, "extern "); break;
        }
        done_from = edit.offset;
    }
    declarations.code = text;
    return declarations;
}

}  // namespace mpify_kernel
