"""Query side: selections (and, later, the read planner)."""
