"""The forge: a branch and a pull request per slice, stacked (``lk stack``).

``stack`` is the stack's record kept in git (refs/loopkit/stack/NAME), each slice's fork
point with it; ``onto`` moves a slice onto a new parent by plumbing (``git rebase --onto``
semantics, from the recorded fork point); ``proof`` verifies a commit's exact tree;
``push`` pushes several branches at once, atomic and with leases; ``clients`` speaks to
GitHub (``gh api``), GitLab (``glab api``) or nothing (a plain remote); ``body`` writes a
pull request's evidence; ``fold`` folds the ledgers CI jobs sent back into one.
"""
