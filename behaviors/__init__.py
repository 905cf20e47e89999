"""Per-task behavior trees (py_trees) that wire perception, planning and control. Arrives with issue 3."""
