"""Verify every case of tests/fixtures/sigstore/bundle-verify with
sigstore-python's library, offline against each case's trusted root, and
print one JSON object: {case: "ok" | "fail: why" | "unsupported: why"}.

    python verify.py tests/fixtures/sigstore
"""

import json
import pathlib
import sys

from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier, policy

IDENTITY = (
    "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon"
    "/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
)
ISSUER = "https://token.actions.githubusercontent.com"

root_dir = pathlib.Path(sys.argv[1])
verdicts = {}
for case in sorted((root_dir / "bundle-verify").iterdir()):
    if not case.is_dir():
        continue
    if (case / "key.pub").exists():
        verdicts[case.name] = "unsupported: key-based bundles (no API in sigstore-python 4.5.1)"
        continue
    read = lambda name, default: (
        (case / name).read_text().strip() if (case / name).exists() else default
    )
    trusted = case / "trusted_root.json"
    if not trusted.exists():
        trusted = root_dir / "trusted_root.production.json"
    artifact = case / "artifact"
    if not artifact.exists():
        artifact = root_dir / "a.txt"
    try:
        verifier = Verifier(trusted_root=TrustedRoot.from_file(str(trusted)))
        bundle = Bundle.from_json((case / "bundle.sigstore.json").read_bytes())
        identity = policy.Identity(
            identity=read("identity", IDENTITY), issuer=read("issuer", ISSUER)
        )
        if bundle._dsse_envelope is not None:
            verifier.verify_dsse(bundle, identity)
            # The statement must name the artifact's digest.
            import hashlib

            digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
            payload = json.loads(bundle._dsse_envelope._inner.payload)
            subjects = [s.get("digest", {}).get("sha256") for s in payload["subject"]]
            if digest not in subjects:
                raise ValueError("the statement does not name the artifact")
        else:
            verifier.verify_artifact(artifact.read_bytes(), bundle, identity)
        verdicts[case.name] = "ok"
    except Exception as e:  # noqa: BLE001 - every refusal is a verdict
        verdicts[case.name] = f"fail: {type(e).__name__}: {str(e)[:200]}"
print(json.dumps(verdicts))
