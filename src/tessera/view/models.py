"""The viewer's frozen-models view (``tessera view URL --models FOLDER``): every model of the
models folder with its checked weights and its layers' output sizes, and, where the folder
holds a split profile saved by ``tessera model profile`` (``NAME.split-profile.json``),
the split estimates per candidate layer for a batch of ``batch`` samples.
"""

from __future__ import annotations

import json
from typing import Any

from tessera.errors import InvalidArgumentError
from tessera.view.core import Viewer

#: The batch the split estimates are computed for.
BATCH = 64


def page(viewer: Viewer) -> dict[str, Any]:
    """The models folder's document (see the module docstring)."""
    if viewer.models is None:
        raise InvalidArgumentError("this viewer shows no models: start it with "
                                   "`tessera view URL --models FOLDER`")
    from tessera.frozen.inventory import layer_infos
    from tessera.frozen.models import check_models
    from tessera.frozen.planner import SplitProfile, choose

    models: list[dict[str, Any]] = []
    for spec, report in check_models(viewer.models):
        infos = layer_infos(spec.arch, spec.num_classes, spec.input.sample_shape)
        doc: dict[str, Any] = {
            "name": spec.name, "arch": spec.arch, "parameters": report.parameters,
            "weights_bytes": report.nbytes, "sha256": spec.sha256,
            "input": list(spec.input.sample_shape),
            "layers": [{"index": i.index, "name": i.name, "shape": list(i.shape),
                        "bytes": i.nbytes} for i in infos],
            "candidates": []}
        saved = viewer.models / f"{spec.name}.split-profile.json"
        if saved.is_file():
            plan = choose(SplitProfile.from_json(json.loads(saved.read_text())), BATCH)
            doc["chosen"] = plan.split
            doc["candidates"] = [
                {"split": c.split, "name": c.name, "feasible": c.feasible,
                 "server_s": c.server_s, "network_s": c.network_s, "client_s": c.client_s,
                 "epoch_s": c.epoch_s, "dollars": c.dollars} for c in plan.candidates]
        models.append(doc)
    return {"folder": viewer.models.name, "batch": BATCH, "models": models}
