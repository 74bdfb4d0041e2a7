#include "cpp_engine.hpp"

#include "common/demangle.hpp"
#include "cpp_text.hpp"
#include "definition_shadowing.hpp"
#include "forked_check.hpp"
#include "newest_definitions.hpp"
#include "rank_declarations.hpp"
#include "recovery.hpp"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/PrettyPrinter.h>
#include <clang/AST/RawCommentList.h>
#include <clang/Basic/FileManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Interpreter/Interpreter.h>
#include <clang/Lex/DirectoryLookup.h>
#include <clang/Lex/HeaderSearch.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <clang/Sema/CodeCompleteConsumer.h>
#include <clang/Sema/Lookup.h>
#include <clang/Sema/Sema.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <regex>
#include <stdexcept>
#include <typeinfo>
#include <utility>

namespace mpify_kernel {
namespace {

using mpify::detail::demangle;

// The current exception's type as its author wrote it: std::throw_with_nested throws a
// std::_Nested_exception<T> (libstdc++), which users know as T.
std::string type_of_current_exception() {
    const std::type_info* type = abi::__cxa_current_exception_type();
    std::string name = type ? demangle(type->name()) : "unknown exception";
    const std::string wrapper = "std::_Nested_exception<";
    if (name.rfind(wrapper, 0) == 0 && name.back() == '>') {
        name = name.substr(wrapper.size(), name.size() - wrapper.size() - 1);
        if (name.size() > 6 && name.compare(name.size() - 6, 6, " const") == 0) name.resize(name.size() - 6);
    }
    return name;
}

// "type: what" of every exception nested in `e` (std::throw_with_nested), outermost first.
void collect_causes(const std::exception& e, std::vector<std::string>& causes) {
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& nested) {
        causes.push_back(type_of_current_exception() + ": " + nested.what());
        collect_causes(nested, causes);
    } catch (...) {
        causes.push_back(type_of_current_exception());
    }
}

std::unique_ptr<clang::CompilerInstance> make_compiler(const std::vector<std::string>& flags) {
    std::vector<const char*> argv;
    for (const std::string& flag : flags) argv.push_back(flag.c_str());
    clang::IncrementalCompilerBuilder builder;
    builder.SetCompilerArgs(argv);
    auto compiler = builder.CreateCpp();
    if (!compiler) throw std::runtime_error("cannot set up clang: " + llvm::toString(compiler.takeError()));
    return std::move(*compiler);
}

// Keeps the names Sema offers at the completion point that start with what was typed.
class NameCollector : public clang::CodeCompleteConsumer {
public:
    explicit NameCollector(std::string prefix)
        : clang::CodeCompleteConsumer(options()), prefix_(std::move(prefix)),
          allocator_(std::make_shared<clang::GlobalCodeCompletionAllocator>()), info_(allocator_) {}

    void ProcessCodeCompleteResults(clang::Sema&, clang::CodeCompletionContext, clang::CodeCompletionResult* results,
                                    unsigned count) override {
        for (unsigned i = 0; i < count; ++i) {
            std::string name;
            const clang::CodeCompletionResult& result = results[i];
            if (result.Kind == clang::CodeCompletionResult::RK_Declaration) {
                if (const clang::IdentifierInfo* id = result.Declaration->getIdentifier()) name = id->getName().str();
            } else if (result.Kind == clang::CodeCompletionResult::RK_Keyword) {
                name = result.Keyword;
            } else if (result.Kind == clang::CodeCompletionResult::RK_Macro) {
                name = result.Macro->getName().str();
            }
            if (!name.empty() && name.compare(0, prefix_.size(), prefix_) == 0 && name.rfind("__", 0) != 0)
                names.push_back(std::move(name));
        }
    }
    clang::CodeCompletionAllocator& getAllocator() override { return info_.getAllocator(); }
    clang::CodeCompletionTUInfo& getCodeCompletionTUInfo() override { return info_; }

    std::vector<std::string> names;

private:
    static clang::CodeCompleteOptions options() {
        clang::CodeCompleteOptions options;
        options.IncludeMacros = true;
        options.IncludeGlobals = true;
        options.IncludeCodePatterns = false;
        return options;
    }
    std::string prefix_;
    std::shared_ptr<clang::GlobalCodeCompletionAllocator> allocator_;
    clang::CodeCompletionTUInfo info_;
};

// The value shown for a cell that ends in an expression: `value.hpp` (kernel/include)
// turns `expr, tag` into a call that publishes the value; for a void expression the
// built-in comma applies, and nothing is shown.
const char* const value_header = "#include <mpify_kernel/value.hpp>\n";

std::string with_value_shown(const std::string& code, const Span& expression) {
    return code.substr(0, expression.begin) + "::mpify_kernel_value::finish(((" +
           code.substr(expression.begin, expression.end - expression.begin) + "), ::mpify_kernel_value::tag{}));" +
           code.substr(expression.end);
}

std::string with_semicolon(const std::string& code, const Span& expression) {
    return code.substr(0, expression.end) + ";" + code.substr(expression.end);
}

bool is_directory(const std::string& path) {
    struct stat info{};
    return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool is_file(const std::string& path) {
    struct stat info{};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

struct CppEngine::State {
    std::vector<std::string> flags;
    std::vector<std::string> include_paths;  // added by add_include_path, in order
    std::string history;                     // every cell that compiled, for completion
    std::unique_ptr<clang::Interpreter> interpreter;
    bool value_header_included = false;
    unsigned statements = 0;  // functions made of top-level statements with lambdas
    unsigned cells = 0;       // cell namespaces (definition_shadowing.hpp)
    // MPIFY_KERNEL_PRECHECK=off: no pre-check (to measure what it costs; a bad cell can
    // then crash the kernel or break the cells after it, as in clang-repl).
    const bool precheck = [] {
        const char* setting = std::getenv("MPIFY_KERNEL_PRECHECK");
        return setting == nullptr || std::strcmp(setting, "off") != 0;
    }();
    // Clang's diagnostics land here instead of on stderr: they become the error reply.
    std::string diagnostics;
    std::unique_ptr<llvm::raw_string_ostream> diagnostics_stream;

    std::string take_diagnostics() {
        diagnostics_stream->flush();
        return std::exchange(diagnostics, {});
    }

    clang::CompilerInstance& compiler() { return *interpreter->getCompilerInstance(); }

    // Every folder #include <...> searches, in order.
    std::vector<std::string> header_folders() {
        std::vector<std::string> folders;
        clang::HeaderSearch& search = compiler().getPreprocessor().getHeaderSearchInfo();
        for (const clang::DirectoryLookup& lookup : search.search_dir_range())
            if (const auto dir = lookup.getDirRef()) folders.push_back(dir->getName().str());
        return folders;
    }

    // True when every line of `directives` is `#include <name>` of a header found in the
    // header search path, in a folder the kernel was started with: such a block needs no
    // pre-check (system headers parse). A header that a folder the notebook added
    // (add_include_path) provides may fail halfway through its own includes, which would
    // leave the session's preprocessor with half-entered headers: that one is checked.
    bool only_existing_system_headers(const std::string& directives) {
        static const std::regex include_line(R"(^\s*#\s*include\s*<([^>]+)>\s*(//.*)?$)");
        static const std::regex quiet_line(R"(^\s*(//.*)?$)");
        const std::vector<std::string> folders = header_folders();
        std::size_t begin = 0;
        while (begin < directives.size()) {
            std::size_t end = directives.find('\n', begin);
            if (end == std::string::npos) end = directives.size();
            const std::string line = directives.substr(begin, end - begin);
            begin = end + 1;
            std::smatch match;
            if (std::regex_match(line, quiet_line)) continue;
            if (!std::regex_match(line, match, include_line)) return false;
            const std::string header = match[1];
            const auto found = std::find_if(folders.begin(), folders.end(),
                                            [&](const std::string& folder) { return is_file(folder + "/" + header); });
            if (found == folders.end() ||
                std::find(include_paths.begin(), include_paths.end(), *found) != include_paths.end())
                return false;
        }
        return true;
    }

    // Linker names the module uses but does not define, that neither the process, the
    // libraries loaded, nor the cells so far define (what would fail at run time as
    // "Failed to materialize symbols", and poison the cells after it).
    std::vector<std::string> unresolved_names(llvm::Module& module) {
        std::vector<std::string> missing;
        auto check = [&](const llvm::GlobalValue& value) {
            if (!value.isDeclaration() || value.getName().empty() || value.getName().starts_with("llvm.")) return;
            const std::string name = value.getName().str();
            if (::dlsym(RTLD_DEFAULT, name.c_str()) != nullptr) return;
            auto address = interpreter->getSymbolAddressFromLinkerName(name);
            if (address) return;
            llvm::consumeError(address.takeError());
            missing.push_back(name);
        };
        for (const llvm::Function& function : module)
            if (!function.isIntrinsic()) check(function);
        for (const llvm::GlobalVariable& variable : module.globals()) check(variable);
        return missing;
    }

    // In a forked child: parses `code` and checks its names; `text` gets the
    // diagnostics, or, with `inspect`, what it returns.
    bool parse_and_check(const std::string& code, std::string& text,
                         const std::function<std::string(clang::PartialTranslationUnit&)>& inspect) {
        auto unit = interpreter->Parse(code);
        if (!unit) {
            llvm::consumeError(unit.takeError());
            text = take_diagnostics();
            if (text.empty()) text = "error: clang could not parse the cell\n";
            return false;
        }
        if (unit->TheModule && !inspect) {  // inspected code is not run (a %%mpify cell's: g++ links it)
            const std::vector<std::string> missing = unresolved_names(*unit->TheModule);
            if (!missing.empty()) {
                text = take_diagnostics();
                for (const std::string& name : missing)
                    text += "error: '" + demangle(name.c_str()) +
                            "' is declared but defined nowhere: no cell and no loaded library defines it "
                            "(load the library that does with #pragma cling load, or define it)\n";
                return false;
            }
        }
        text = inspect ? inspect(*unit) : std::string();
        return true;
    }

    // The pre-check: parse_and_check in a child. Fills `outcome` when it failed.
    bool checked_in_child(const std::string& code, Outcome& outcome,
                          const std::function<std::string(clang::PartialTranslationUnit&)>& inspect = {},
                          std::string* inspected = nullptr) {
        if (!precheck && !inspect) return true;
        const ChildVerdict verdict =
            check_in_child([&](std::string& text) { return parse_and_check(code, text, inspect); }, &diagnostics);
        switch (verdict.kind) {
            case ChildVerdict::Kind::passed:
                if (inspected) *inspected = verdict.text;
                return true;
            case ChildVerdict::Kind::failed:
                outcome.kind = Outcome::Kind::compile_error;
                outcome.diagnostics = verdict.text;
                outcome.message = "Parsing failed.";
                return false;
            case ChildVerdict::Kind::crashed:
                outcome.kind = Outcome::Kind::compile_error;
                outcome.diagnostics = verdict.text;
                outcome.message = std::string("clang crashed on this cell (") + ::strsignal(verdict.signal) +
                                  "): a bug of clang 19's interpreter; the session is intact. Check the code above "
                                  "the crash (a missing ';' or #include is the usual cause)";
                if (outcome.diagnostics.find("error:") == std::string::npos)
                    outcome.diagnostics += "error: " + outcome.message + "\n";
                return false;
            case ChildVerdict::Kind::interrupted:
                outcome.kind = Outcome::Kind::interrupted;
                outcome.message = "interrupted while the cell was compiled";
                return false;
        }
        return false;
    }

    // Parses and runs `code` in the session, the cell's code guarded (recovery.hpp).
    Outcome parse_and_execute(const std::string& code) {
        Outcome outcome;
        try {
            auto unit = interpreter->Parse(code);
            if (!unit) {
                outcome.kind = Outcome::Kind::compile_error;
                outcome.message = llvm::toString(unit.takeError());
            } else {
                llvm::Error execution = llvm::Error::success();
                clang::PartialTranslationUnit& ptu = *unit;
                const GuardedEnd end = run_guarded([&] { execution = interpreter->Execute(ptu); });
                if (end.kind == GuardedEnd::Kind::interrupted) {
                    llvm::consumeError(std::move(execution));
                    outcome.kind = Outcome::Kind::interrupted;
                    outcome.message = "interrupted";
                } else if (end.kind == GuardedEnd::Kind::crashed) {
                    llvm::consumeError(std::move(execution));
                    outcome.kind = Outcome::Kind::crashed;
                    outcome.exception_type = std::string("Crash: ") + ::sigabbrev_np(end.signal);
                    outcome.message = std::string("the cell's code died of ") + ::strsignal(end.signal) + " " +
                                      end.where + "; the kernel caught it and the session goes on";
                } else if (execution) {
                    outcome.kind = Outcome::Kind::compile_error;
                    outcome.message = llvm::toString(std::move(execution));
                }
            }
        } catch (const std::exception& e) {
            outcome.kind = Outcome::Kind::exception;
            outcome.exception_type = type_of_current_exception();
            outcome.message = e.what();
            collect_causes(e, outcome.causes);
        } catch (...) {
            outcome.kind = Outcome::Kind::exception;
            outcome.exception_type = type_of_current_exception();
            outcome.message = "(not a std::exception)";
        }
        if (outcome.kind != Outcome::Kind::compile_error) history += code + "\n";
        outcome.diagnostics = take_diagnostics();
        if (auto jit = interpreter->getExecutionEngine()) forget_outdated_definitions(*jit);
        else llvm::consumeError(jit.takeError());
        return outcome;
    }

    // Step 1 of a cell: its leading #include block.
    bool run_directives(const std::string& directives, Outcome& outcome) {
        if (directives.empty()) return true;
        if (!only_existing_system_headers(directives) && !checked_in_child(directives, outcome)) return false;
        outcome = parse_and_execute(directives);
        return outcome.kind == Outcome::Kind::ok;
    }

    bool ensure_value_header(Outcome& outcome) {
        if (value_header_included) return true;
        outcome = parse_and_execute(value_header);
        value_header_included = outcome.kind == Outcome::Kind::ok;
        return value_header_included;
    }
};

CppEngine::CppEngine(std::vector<std::string> compiler_flags) : state_(std::make_unique<State>()) {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    state_->flags = std::move(compiler_flags);
    auto interpreter = clang::Interpreter::create(make_compiler(state_->flags));
    if (!interpreter)
        throw std::runtime_error("cannot start clang's interpreter: " + llvm::toString(interpreter.takeError()));
    state_->interpreter = std::move(*interpreter);

    clang::CompilerInstance& compiler = state_->compiler();
    state_->diagnostics_stream = std::make_unique<llvm::raw_string_ostream>(state_->diagnostics);
    auto* printer = new clang::TextDiagnosticPrinter(*state_->diagnostics_stream, &compiler.getDiagnosticOpts());
    printer->BeginSourceFile(compiler.getLangOpts(), &compiler.getPreprocessor());
    compiler.getDiagnostics().setClient(printer, /*ShouldOwnClient=*/true);
    compiler.getDiagnostics().setShowColors(false);

    auto jit = state_->interpreter->getExecutionEngine();
    if (!jit) throw std::runtime_error("cannot start clang's JIT: " + llvm::toString(jit.takeError()));
    install_newest_definitions(*jit);
    install_definition_shadowing(compiler);
}

CppEngine::~CppEngine() = default;

Outcome CppEngine::run(const std::string& code, Definitions definitions) {
    Outcome outcome;
    const LeadingDirectives parts = split_leading_directives(code);
    if (!state_->run_directives(parts.directives, outcome)) return outcome;
    const std::string& rest = parts.directives.empty() ? code : parts.rest;
    if (rest.find_first_not_of(" \t\r\n") == std::string::npos) return outcome;

    // Each version of the cell comes in two: its definitions in the cell's namespace, where
    // they may replace earlier ones (definition_shadowing.hpp), and, should the namespace
    // be what fails, as written. Statements with lambdas go into functions of their own in
    // both (cpp_text.hpp says why).
    std::vector<std::string> versions;
    auto add_version = [&](const std::string& text) {
        const std::string plain = wrap_statements_with_lambdas(text, state_->statements);
        const std::string shadowing = definitions == Definitions::may_replace_earlier
                                          ? with_definitions_shadowing(plain, ++state_->cells)
                                          : plain;
        versions.push_back(shadowing);
        if (shadowing != plain) versions.push_back(plain);
    };
    std::size_t reported = 0;  // the version whose failure the user sees
    if (const auto expression = trailing_expression(rest)) {
        // The value, if the expression has one (a declaration without ';', `int x = 3`,
        // does not: then the cell runs as written, with its ';').
        if (!state_->ensure_value_header(outcome)) return outcome;
        add_version(with_value_shown(rest, *expression));
        reported = versions.size();
        add_version(with_semicolon(rest, *expression));
    } else if (const auto statement = unterminated_last_statement(rest)) {
        add_version(with_semicolon(rest, *statement));  // `auto f = [](int x) { ... }` as the last line
    } else {
        add_version(rest);
    }
    for (std::size_t i = 0; i < versions.size(); ++i) {
        Outcome failure;
        if (state_->checked_in_child(versions[i], failure)) {
            Outcome ran = state_->parse_and_execute(versions[i]);
            ran.diagnostics = without_shadowing_text(ran.diagnostics);  // warnings
            return ran;
        }
        if (failure.kind == Outcome::Kind::interrupted) return failure;
        if (i == reported) outcome = failure;
    }
    outcome.diagnostics = without_shadowing_text(outcome.diagnostics);
    return outcome;
}

Outcome CppEngine::run_trusted(const std::string& code) { return state_->parse_and_execute(code); }

Outcome CppEngine::declarations_of(const std::string& code, Declarations& out) {
    Outcome outcome;
    std::string report;
    auto inspect = [&](clang::PartialTranslationUnit& unit) {
        return encode_rank_edits(unit, state_->compiler().getSourceManager());
    };
    if (!state_->checked_in_child(code, outcome, inspect, &report)) return outcome;
    out = apply_rank_edits(code, report);
    return outcome;
}

void CppEngine::add_include_path(const std::string& folder) {
    clang::CompilerInstance& compiler = state_->compiler();
    auto directory = compiler.getFileManager().getOptionalDirectoryRef(folder);
    if (!directory || !is_directory(folder))
        throw std::runtime_error("add_include_path(\"" + folder + "\"): no such folder");
    compiler.getPreprocessor().getHeaderSearchInfo().AddSearchPath(
        clang::DirectoryLookup(*directory, clang::SrcMgr::C_User, /*isFramework=*/false), /*isAngled=*/true);
    state_->include_paths.push_back(folder);
}

const std::vector<std::string>& CppEngine::include_paths() const { return state_->include_paths; }

void CppEngine::load_library(const std::string& path) {
    if (llvm::Error error = state_->interpreter->LoadDynamicLibrary(path.c_str()))
        throw std::runtime_error(llvm::toString(std::move(error)));
}

Completions CppEngine::complete(const std::string& code, std::size_t cursor) {
    cursor = std::min(cursor, code.size());
    std::size_t start = cursor;
    while (start > 0 && (std::isalnum(static_cast<unsigned char>(code[start - 1])) || code[start - 1] == '_')) --start;
    const std::string prefix = code.substr(start, cursor - start);

    // A separate compiler parses every cell that ran, then this one up to the cursor,
    // and asks Sema what fits there: names, members, qualified names alike. Nothing it
    // parses reaches the session. (clang-repl's own completer sees the session's names
    // but not the members of its namespaces and classes: `mpify::ra` found nothing.)
    const std::string source = state_->history + code.substr(0, cursor);
    const auto line = static_cast<unsigned>(std::count(source.begin(), source.end(), '\n') + 1);
    const std::size_t line_start = source.rfind('\n') == std::string::npos ? 0 : source.rfind('\n') + 1;
    const auto column = static_cast<unsigned>(source.size() - line_start + 1);

    std::vector<std::string> flags = state_->flags;
    for (const std::string& folder : state_->include_paths) flags.push_back("-I" + folder);
    std::unique_ptr<clang::CompilerInstance> compiler;
    try {
        compiler = make_compiler(flags);
    } catch (const std::exception&) {
        return {};
    }
    static const char* const file_name = "<completion>.cpp";
    compiler->getFrontendOpts().Inputs.clear();
    compiler->getFrontendOpts().Inputs.emplace_back(file_name, clang::Language::CXX);
    compiler->getFrontendOpts().CodeCompletionAt = clang::ParsedSourceLocation{file_name, line, column};
    compiler->getPreprocessorOpts().addRemappedFile(file_name, llvm::MemoryBuffer::getMemBufferCopy(source).release());
    compiler->getDiagnostics().setClient(new clang::IgnoringDiagConsumer, /*ShouldOwnClient=*/true);
    auto* collector = new NameCollector(prefix);
    compiler->setCodeCompletionConsumer(collector);
    clang::SyntaxOnlyAction action;
    compiler->ExecuteAction(action);

    Completions completions;
    completions.start = start;
    completions.names = collector->names;
    std::sort(completions.names.begin(), completions.names.end());
    completions.names.erase(std::unique(completions.names.begin(), completions.names.end()), completions.names.end());
    return completions;
}

std::string CppEngine::describe(const std::string& name) {
    clang::Sema& sema = state_->compiler().getSema();
    clang::ASTContext& context = sema.getASTContext();
    // Walk the qualified name one component at a time, as Sema would look it up.
    std::vector<std::string> parts;
    for (std::size_t begin = name.rfind("::", 0) == 0 ? 2 : 0; begin <= name.size();) {
        const std::size_t end = name.find("::", begin);
        parts.push_back(name.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
        if (end == std::string::npos) break;
        begin = end + 2;
    }
    clang::DeclContext* scope = context.getTranslationUnitDecl();
    std::vector<clang::NamedDecl*> found;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].empty()) return {};
        clang::LookupResult result(sema, clang::DeclarationName(&context.Idents.get(parts[i])), clang::SourceLocation(),
                                   i + 1 < parts.size() ? clang::Sema::LookupNestedNameSpecifierName
                                                        : clang::Sema::LookupOrdinaryName);
        result.suppressDiagnostics();
        if (!sema.LookupQualifiedName(result, scope)) {
            if (i + 1 == parts.size()) {  // a type name: look for a tag
                clang::LookupResult tags(sema, clang::DeclarationName(&context.Idents.get(parts[i])),
                                         clang::SourceLocation(), clang::Sema::LookupTagName);
                tags.suppressDiagnostics();
                if (sema.LookupQualifiedName(tags, scope)) found.assign(tags.begin(), tags.end());
            }
            if (found.empty()) return {};
            break;
        }
        if (i + 1 == parts.size()) {
            found.assign(result.begin(), result.end());
            break;
        }
        clang::NamedDecl* next = result.getRepresentativeDecl()->getUnderlyingDecl();
        if (auto* alias = llvm::dyn_cast<clang::NamespaceAliasDecl>(next)) next = alias->getNamespace();
        if (auto* typedef_decl = llvm::dyn_cast<clang::TypedefNameDecl>(next))
            if (auto* record = typedef_decl->getUnderlyingType()->getAsCXXRecordDecl()) next = record;
        scope = llvm::dyn_cast<clang::DeclContext>(next);
        if (scope == nullptr) return {};
    }

    clang::PrintingPolicy policy(context.getLangOpts());
    policy.TerseOutput = true;  // declarations, not bodies
    policy.SuppressScope = false;
    policy.FullyQualifiedName = true;
    std::string text;
    llvm::raw_string_ostream out(text);
    const clang::SourceManager& sources = context.getSourceManager();
    for (clang::NamedDecl* declaration : found) {
        if (found.size() > 12 && &declaration == &found[12]) break;
        if (const clang::RawComment* comment = context.getRawCommentForAnyRedecl(declaration))
            out << comment->getFormattedText(sources, context.getDiagnostics()) << "\n";
        declaration->print(out, policy);
        out << "\n";
        const clang::PresumedLoc where = sources.getPresumedLoc(declaration->getLocation());
        if (where.isValid()) out << "  declared in " << where.getFilename() << ":" << where.getLine() << "\n";
        out << "\n";
    }
    if (found.size() > 12) out << "(" << found.size() - 12 << " more declarations)\n";
    out.flush();
    return without_cell_namespaces(text);
}

}  // namespace mpify_kernel
