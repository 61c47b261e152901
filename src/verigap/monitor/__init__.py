"""Trajectory monitors: the battery's episodes as a labelled chat dataset, and detectors
(the builtin static one, an LLM, or your own function) scored on it, isolated and contrastive.

``verigap monitor export RUN_DIR`` writes the dataset; ``verigap monitor eval`` scores a
detector on it. See ``docs/detection.md``.
"""
