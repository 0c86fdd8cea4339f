"""Push a component to an OCI registry with ORAS, in the CNCF wasm layout
(config application/vnd.wasm.config.v0+json, one application/wasm layer),
for tests/e2e/tests/oci.rs.

    python push.py 127.0.0.1:PORT/repo:tag component.wasm
"""

import os
import shutil
import sys
import tempfile

import oras.client

target, component = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    shutil.copy(component, "component.wasm")
    with open("config.json", "w") as f:
        f.write("{}")
    client = oras.client.OrasClient(insecure=True)
    response = client.push(
        target=target,
        files=["component.wasm:application/wasm"],
        manifest_config="config.json:application/vnd.wasm.config.v0+json",
        disable_path_validation=True,
    )
    if response.status_code not in (200, 201):
        sys.exit(f"push answered {response.status_code}: {response.text}")
print(f"pushed {component} to {target}")
