#include "newest_definitions.hpp"

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>

#include <dlfcn.h>

#include <memory>
#include <mutex>

namespace mpify_kernel {
namespace {

using NewestFunction = void* (*)(const char*);
using Generation = unsigned long (*)();

template <class Function>
Function mpify_entry(const char* name) {
    return reinterpret_cast<Function>(::dlsym(RTLD_DEFAULT, name));
}

// What the lookup has answered, to be forgotten when mpify loads another library.
struct Answers {
    std::mutex lock;
    llvm::orc::SymbolNameSet names;
    unsigned long generation = 0;
};
Answers answers;

class NewestSourceFunctions : public llvm::orc::DefinitionGenerator {
public:
    llvm::Error tryToGenerate(llvm::orc::LookupState&, llvm::orc::LookupKind, llvm::orc::JITDylib& library,
                              llvm::orc::JITDylibLookupFlags, const llvm::orc::SymbolLookupSet& wanted) override {
        // Looked up each time until found: libmpify arrives with a cell's #pragma or load_source.
        const auto newest = mpify_entry<NewestFunction>("mpify_newest_source_function");
        if (newest == nullptr) return llvm::Error::success();
        llvm::orc::SymbolMap found;
        for (const auto& [name, flags] : wanted) {
            if (void* address = newest((*name).str().c_str()))
                found[name] = {llvm::orc::ExecutorAddr::fromPtr(address),
                               llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
        }
        if (found.empty()) return llvm::Error::success();
        {
            std::lock_guard guard(answers.lock);
            for (const auto& entry : found) answers.names.insert(entry.first);
        }
        return library.define(llvm::orc::absoluteSymbols(std::move(found)));
    }
};

}  // namespace

void install_newest_definitions(llvm::orc::LLJIT& jit) {
    jit.getMainJITDylib().addGenerator(std::make_unique<NewestSourceFunctions>());
}

void forget_outdated_definitions(llvm::orc::LLJIT& jit) {
    const auto generation = mpify_entry<Generation>("mpify_source_generation");
    if (generation == nullptr) return;
    llvm::orc::SymbolNameSet outdated;
    {
        std::lock_guard guard(answers.lock);
        const unsigned long now = generation();
        if (now == answers.generation) return;
        answers.generation = now;
        outdated.swap(answers.names);
    }
    if (outdated.empty()) return;
    // Code compiled earlier keeps the address it was given; the next cell asks again.
    llvm::consumeError(jit.getMainJITDylib().remove(outdated));
}

}  // namespace mpify_kernel
