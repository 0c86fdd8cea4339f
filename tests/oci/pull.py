"""Pull a component from an OCI registry with ORAS, logged in, for
tests/e2e/tests/trust.rs: prints `pulled <path>` of the one file it saved.

    python pull.py 127.0.0.1:PORT/repo:tag OUTDIR USER PASSWORD
"""

import os
import sys
import tempfile

import oras.client

target, outdir = sys.argv[1], sys.argv[2]
# The registry's htpasswd login is HTTP Basic: ORAS's basic backend.
client = oras.client.OrasClient(insecure=True, auth_backend="basic")
client.login(
    username=sys.argv[3],
    password=sys.argv[4],
    hostname=target.split("/")[0],
    tls_verify=False,
    config_path=os.path.join(tempfile.mkdtemp(), "config.json"),
)
files = client.pull(target=target, outdir=outdir)
if len(files) != 1:
    sys.exit(f"expected one file, pulled {files}")
print(f"pulled {files[0]}")
