"""The ratchet's transactions: what a loop does with the work tree between attempts.

A loop in any language drives the same steps through ``lk task`` (loopkit.cli.task):

``begin``   take the one-loop lock of the work tree, finish whatever a loop that stopped
            left half done (``recovery``), and record where the task starts (the journal)
``save``    keep the work tree as it stands under ``refs/loopkit/<task>/<label>``
``land``    commit exactly the tree a complete decision's checks ran on
``park``    save, revert to the start, reset named ignored paths, write the retrospective,
            mark the task parked, commit memory and checklist
``cancel``  save the tree and leave it as it is
``end``     release the lock; a task still open has its tree saved and its journal kept

Each step writes its intent to the journal (``journal``) before it changes anything, so a
stop of any kind at any point leaves a state the next ``begin`` finishes: it lands what was
being landed, parks what was being parked, marks what was committed, or saves an
interrupted attempt under a ref and brings the tree back to where the task began.

The modules: ``lock`` (one loop per work tree, liveness by pid and start time),
``journal`` (the task's durable record), ``trees`` (the work tree as a tree object,
bringing it to one, saving under refs), ``memory`` (the retrospective), ``steps`` (the
transactions themselves) and ``recovery`` (finishing what a stopped loop left).
"""
