"""parallel-ssh's ParallelSSHClient on a fleet written by bench/peers.sh: FLEET CONC COMMAND OUTDIR.
Every node's stdout goes to OUTDIR/<i>.out (an exception instead, when it failed)."""
import sys

from pssh.clients import ParallelSSHClient
from pssh.config import HostConfig

fleet, conc, cmd, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
hosts = [l.strip() for l in open(f"{fleet}/hosts") if l.strip()]
conf = [l.split() for l in open(f"{fleet}/ssh_config") if l.strip()]
key = [w[1] for w in conf if w[0] == "IdentityFile"][0]
user = [w[1] for w in conf if w[0] == "User"][0]
configs = [HostConfig(port=int(h.rsplit(":", 1)[1]), user=user, private_key=key) for h in hosts]
client = ParallelSSHClient([h.rsplit(":", 1)[0] for h in hosts], host_config=configs,
                           pool_size=conc, timeout=60, num_retries=1)
results = client.run_command(cmd, stop_on_errors=False, encoding="latin-1")
client.join(results)
for i, r in enumerate(results):
    with open(f"{out}/{i}.out", "w", encoding="latin-1") as f:
        if r.exception is not None:
            f.write(f"error: {r.exception!r}\n")
            continue
        for line in r.stdout:
            f.write(line + "\n")
