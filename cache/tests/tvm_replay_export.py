"""Open a MetaSchedule database exported by tgc with stock TVM and replay every record.

    python tvm_replay_export.py DIR

Prints one JSON object: records loaded, workloads, records replayed, workloads whose best
record was built, workloads without a valid record, and workloads whose exported hash
equals TVM's own structural hash.
Any failure raises (non-zero exit). Run by cache/tests/tvm_export.rs.
"""

import json
import os
import sys

import tvm
from tvm.s_tir import meta_schedule as ms


def main(d):
    # Opening replays every record: one bad record makes this raise.
    db = ms.database.JSONDatabase(
        path_workload=os.path.join(d, "database_workload.json"),
        path_tuning_record=os.path.join(d, "database_tuning_record.json"),
        allow_missing=False,
    )
    with open(os.path.join(d, "database_workload.json")) as f:
        file_hashes = {json.loads(line)[0] for line in f}
    records = db.get_all_tuning_records()
    out = {"records": len(records), "replayed": 0, "built": 0, "hash_matches": 0, "without_valid": 0}
    workloads = {}
    for rec in records:
        rec.as_measure_candidate()  # replays the trace with detailed errors
        out["replayed"] += 1
        workloads.setdefault(str(rec.workload.as_json()[0]), rec.workload)
    out["workloads"] = len(workloads)
    for shash, workload in workloads.items():
        if shash in file_hashes:
            out["hash_matches"] += 1
        top = db.get_top_k(workload, 1)
        if not top:
            out["without_valid"] += 1
            continue
        best = top[0]
        sch = tvm.s_tir.Schedule(workload.mod)
        best.trace.apply_to_schedule(sch, remove_postproc=False)
        tvm.compile(sch.mod, target=best.target)
        out["built"] += 1
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
