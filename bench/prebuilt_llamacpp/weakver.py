# Evidence script for docs/judges.md "A prebuilt llama.cpp for the first run?" (paths as run on 2026-12-02).
"""Mark the GLIBC_2.38 version need of an ELF .so as weak (VER_FLG_WEAK), in place."""
import struct
import sys


def patch(path):
    b = bytearray(open(path, "rb").read())
    shoff, = struct.unpack_from("<Q", b, 0x28); shentsz, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsz) for i in range(shnum)]
    n = 0
    for s in secs:
        if s[1] != 0x6ffffffe: continue  # SHT_GNU_verneed
        strtab = secs[s[6]]; off = s[4]
        for _ in range(s[7]):
            _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", b, off); a = off + aux
            for _ in range(cnt):
                h, fl, other, name, anext = struct.unpack_from("<IHHII", b, a)
                nm = bytes(b[strtab[4] + name:strtab[4] + name + 16]).split(b"\0")[0]
                if nm == b"GLIBC_2.38":
                    struct.pack_into("<H", b, a + 4, fl | 2); n += 1
                a += anext
            off += nxt
    open(path, "wb").write(b); print(path, n)
for p in sys.argv[1:]: patch(p)
