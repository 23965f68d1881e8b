"""People in the loop: relation labels for data that has none (``label``), 0-3-7 scores of a sweep's answers and
which metric agrees with them (``annotate``)."""
