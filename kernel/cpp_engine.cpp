#include "cpp_engine.hpp"

#include <clang/Basic/FileManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Sema/CodeCompleteConsumer.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Interpreter/CodeCompletion.h>
#include <clang/Interpreter/Interpreter.h>
#include <clang/Lex/DirectoryLookup.h>
#include <clang/Lex/HeaderSearch.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <typeinfo>
#include <utility>

namespace mpify_kernel {
namespace {

std::string demangle(const char* name) {
    int status = 0;
    char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string result = status == 0 && readable ? readable : name;
    std::free(readable);
    return result;
}

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

}  // namespace

struct CppEngine::State {
    std::vector<std::string> flags;
    std::vector<std::string> include_paths;  // added by add_include_path, in order
    std::string history;                     // every cell that compiled, for completion
    std::unique_ptr<clang::Interpreter> interpreter;
    // Clang's diagnostics land here instead of on stderr: they become the error reply.
    std::string diagnostics;
    std::unique_ptr<llvm::raw_string_ostream> diagnostics_stream;

    std::string take_diagnostics() {
        diagnostics_stream->flush();
        return std::exchange(diagnostics, {});
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

    clang::CompilerInstance& compiler = *state_->interpreter->getCompilerInstance();
    state_->diagnostics_stream = std::make_unique<llvm::raw_string_ostream>(state_->diagnostics);
    auto* printer = new clang::TextDiagnosticPrinter(*state_->diagnostics_stream, &compiler.getDiagnosticOpts());
    printer->BeginSourceFile(compiler.getLangOpts(), &compiler.getPreprocessor());
    compiler.getDiagnostics().setClient(printer, /*ShouldOwnClient=*/true);
    compiler.getDiagnostics().setShowColors(false);
}

CppEngine::~CppEngine() = default;

Outcome CppEngine::run(const std::string& code) {
    Outcome outcome;
    try {
        if (llvm::Error error = state_->interpreter->ParseAndExecute(code)) {
            outcome.kind = Outcome::Kind::compile_error;
            outcome.message = llvm::toString(std::move(error));
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
    if (outcome.kind != Outcome::Kind::compile_error) state_->history += code + "\n";
    outcome.diagnostics = state_->take_diagnostics();
    return outcome;
}

void CppEngine::add_include_path(const std::string& folder) {
    clang::CompilerInstance& compiler = *state_->interpreter->getCompilerInstance();
    auto directory = compiler.getFileManager().getOptionalDirectoryRef(folder);
    if (!directory) throw std::runtime_error("add_include_path(\"" + folder + "\"): no such folder");
    compiler.getPreprocessor().getHeaderSearchInfo().AddSearchPath(
        clang::DirectoryLookup(*directory, clang::SrcMgr::C_User, /*isFramework=*/false), /*isAngled=*/true);
    state_->include_paths.push_back(folder);
}

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

}  // namespace mpify_kernel
