# cmake -DIN=obj -DOUT=file.c -P embed.cmake: the in-kernel judge's
# object as a C array (nfq_bpf.c loads it from memory).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by embed.cmake */\n"
  "#include <stddef.h>\n"
  "const unsigned char nfq_bpf_obj[] = {\n${bytes}\n};\n"
  "const size_t nfq_bpf_obj_len = ${len};\n")
