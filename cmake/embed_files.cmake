# Writes OUT: a C++ initializer list of {"file name", R"(contents)"} pairs.
set(content "")
foreach(f IN LISTS FILES)
  get_filename_component(name ${f} NAME)
  file(READ ${f} text)
  string(APPEND content "{\"${name}\", R\"STOWAGE_EMBED(${text})STOWAGE_EMBED\"},\n")
endforeach()
file(WRITE ${OUT} "${content}")
