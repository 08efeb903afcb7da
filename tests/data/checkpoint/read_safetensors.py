# Reads a safetensors file with the standard library only: prints the metadata, then each
# tensor's name, dtype, shape and first values. Usage: python3 read_safetensors.py FILE
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    (header_len,) = struct.unpack("<Q", f.read(8))  # 8-byte little-endian length
    header = json.loads(f.read(header_len))  # UTF-8 JSON, padded with spaces
    data = f.read()  # offsets count from here

for key, value in header.pop("__metadata__", {}).items():
    print(f"metadata {key} = {value!r}")
for name, t in header.items():
    begin, end = t["data_offsets"]
    code = {"F32": "f", "F64": "d"}[t["dtype"]]
    count = (end - begin) // struct.calcsize(code)
    values = struct.unpack_from(f"<{count}{code}", data, begin)
    print(name, t["dtype"], t["shape"], list(values[:4]))
