"""Write the shop's 3000 cached orders into the cluster, each to the master owning its slot."""
import socket
import sys


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def cmd(*args) -> bytes:
    return b"".join([f"*{len(args)}\r\n".encode()] + [
        f"${len(str(a).encode())}\r\n{a}\r\n".encode() for a in args])


def slots(host):
    """CLUSTER SLOTS, parsed just enough: [(start, end, ip)]."""
    out = []
    with socket.create_connection((host, 6379), timeout=5) as s:
        s.sendall(cmd("CLUSTER", "SLOTS"))
        f = s.makefile("rb")

        def read():
            line = f.readline().rstrip(b"\r\n")
            t, rest = line[:1], line[1:].decode()
            if t in (b"+", b"-"):
                return rest
            if t == b":":
                return int(rest)
            if t == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2].decode()
            return [read() for _ in range(int(rest))]
        for entry in read():
            out.append((entry[0], entry[1], entry[2][0]))
    return out


table = slots(sys.argv[1])
batches: dict[str, list[bytes]] = {}
for i in range(1, 3001):
    key = f"order:{i:04d}"
    slot = crc16(key.encode()) % 16384
    ip = next(ip for a, b, ip in table if a <= slot <= b)
    batches.setdefault(ip, []).append(cmd("SET", key, f"item-{i * 7 % 1000}"))
for ip, cmds in batches.items():
    with socket.create_connection((ip, 6379), timeout=10) as s:
        s.sendall(b"".join(cmds))
        f = s.makefile("rb")
        for _ in cmds:
            if f.readline() != b"+OK\r\n":
                sys.exit(f"write to {ip} failed")
print({ip: len(c) for ip, c in batches.items()})
