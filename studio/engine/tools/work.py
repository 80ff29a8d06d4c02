"""An agent's hold on a step and its evidence: claim, renew, upload."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from studio.directory import Identity
from studio.store import Batch, BlobRow

from .. import access, leases, views
from .. import machine as m
from ..call import Call
from ..errors import ToolError
from ..events import FileUploaded
from ..files import FileInfo, decode_upload
from ..state import ENDED, json_copy

if TYPE_CHECKING:
    from ..engine import Engine


def claim(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    if ident.kind != "agent":
        raise ToolError("forbidden", "Only an agent identity claims steps.")
    run = engine.run(args["runId"])
    step_id = args["stepId"]
    call.about(run_id=run.id, step_id=step_id)
    process = engine.process_of(run)
    step = process.by_id.get(step_id)  # `process.step`'s dict, read once for the test and the step
    if step is None:
        raise ToolError("not_found", "No such step in this run.")
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
        raise ToolError("conflict", "The run has ended.", ["not_ready"])
    if step.kind != "agent":
        raise ToolError("forbidden", "Only agent steps are claimed; people decide work items.")
    if not access.may_claim(ident, step):
        raise ToolError("forbidden", "This step is for other agents.")
    engine.paused.refuse_if_paused(ident.id, run.process, step_id)
    st = run.steps[step_id]
    if st.state == "claimed" and st.lease is not None:
        mine = st.lease.claimant == ident.id
        raise ToolError("conflict", "The step is claimed.", ["claimed_by_you" if mine else "claimed_by_other"])
    if st.state != "ready":
        raise ToolError("conflict", "The step is not ready.", ["not_ready"])
    tx = engine.begin(run, ident.id)
    attempt = st.attempt + 1
    issued = leases.issue(engine.signer, engine.ids("t"), run, step_id, ident.id, attempt, engine.now(),
                          engine.lease_seconds)
    m.claim(tx, step_id, ident.id, issued.token_id, issued.expires_at)
    call.about(attempt=attempt)
    new = engine.finish(tx)
    data = {"token": issued.token, "expiresAt": issued.expires_at, "mode": run.mode, "step": views.claim_step(step),
            "handoff": json_copy(st.handoff), "body": process.body,
            "data": views.run_data(new, engine.file_url)}
    return engine.answer(call, data, tx.batch, [new])


def renew(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    if ident.kind != "agent":
        raise ToolError("forbidden", "Only an agent identity holds leases.")
    run, step_id, claims = leases.verified(engine.signer, engine.find_run, args["token"], call)
    if run.state in ENDED:  # `run.is_ended`, without the property's frame
        raise ToolError("stale", "The run has ended; the lease with it.")
    lease = leases.current(ident, run, step_id, claims, engine.now())
    engine.paused.refuse_if_paused(ident.id, run.process, step_id)  # the lease runs out: see pauses.py
    tx = engine.begin(run, ident.id)
    issued = leases.issue(engine.signer, engine.ids("t"), run, step_id, ident.id, lease.attempt, engine.now(),
                          engine.lease_seconds)
    m.renew(tx, step_id, lease, issued.token_id, issued.expires_at, args.get("progress"), "progress" in args)
    new = engine.finish(tx)
    return engine.answer(call, {"token": issued.token, "expiresAt": issued.expires_at}, tx.batch, [new])


def upload(engine: Engine, ident: Identity, args: dict[str, Any], call: Call) -> dict[str, Any]:
    if ident.kind != "agent":
        raise ToolError("forbidden", "Only an agent identity uploads evidence.")
    content = decode_upload(args, engine.max_upload_bytes)
    file_id = engine.ids("f")
    sha = hashlib.sha256(content).hexdigest()
    at = engine.clock.iso()
    batch = Batch()
    batch.blobs.append(BlobRow(file_id, content))
    # the fields given, not validated again (events.unpack): the contract's checks made both names text
    batch.event(at, None, None, FileUploaded.TYPE, ident.id, {"file": file_id, "name": args["fileName"],
                "bytes": len(content), "contentType": args["contentType"], "sha256": sha})
    info = FileInfo(args["fileName"], args["contentType"], len(content), sha, ident.id)  # name, type, bytes, sha256, by
    return engine.answer(call, {"id": file_id, "sha256": sha, "bytes": len(content)}, batch,
                         after=lambda: engine.add_file(file_id, info))
