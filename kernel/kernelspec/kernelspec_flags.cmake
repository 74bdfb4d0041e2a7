# mpify_kernelspec_flags(OUT KERNEL_INCLUDE [FOLDER | -LFOLDER]...): the kernelspec's compiler
# flags, as the JSON strings of its argv: the kernel's own headers, then mpify's headers and
# libraries, so that a notebook includes <mpify/...> and loads libmpify without naming a
# folder. An include folder the compiler searches anyway is left out (IMPLICIT: that list):
# a second -I/usr/include would break #include_next.
function(mpify_kernelspec_flags out implicit kernel_include)
  set(flags "-I${kernel_include}")
  foreach(folder IN LISTS ARGN)
    list(FIND implicit "${folder}" searched_anyway)  # (not IN_LIST: cmake --install runs this without policies)
    if(folder MATCHES "^-L")
      list(APPEND flags "${folder}")
    elseif(searched_anyway EQUAL -1)
      list(APPEND flags "-I${folder}")
    endif()
  endforeach()
  list(JOIN flags "\", \"" joined)
  set(${out} "\"${joined}\"" PARENT_SCOPE)
endfunction()
