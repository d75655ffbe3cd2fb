"""The privacy boundary is structural: only the fit reads private records."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dpprefsyn"
ALLOWED = {PACKAGE / "cli.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_the_cli_fit_command_imports_the_private_package():
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "private" not in p.relative_to(PACKAGE).parts[:1]
        and p not in ALLOWED
        and any(m.startswith("dpprefsyn.private") for m in _imports(p))
    ]
    assert offenders == []


def test_artifact_loading_needs_nothing_private(tmp_path):
    """A saved model loads and scores with the private package never imported."""
    import subprocess
    import sys

    import numpy as np

    from dpprefsyn.private import FitConfig, fit_from_embeddings

    rng = np.random.default_rng(0)
    ch, rj = rng.normal(size=(300, 8)), rng.normal(size=(300, 8))
    fit_from_embeddings(ch, rj, FitConfig(projection="none", insecure_seed=0)).save(tmp_path)
    code = (
        "import sys, numpy as np\n"
        "from dpprefsyn.artifact import PreferenceModel\n"
        f"m = PreferenceModel.load({str(tmp_path)!r})\n"
        "m.scores(np.ones((2, 8)))\n"
        "assert not any(k.startswith('dpprefsyn.private') for k in sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
