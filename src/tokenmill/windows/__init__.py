"""Sliding, semantic and multi-scale windows over token ids; coverage checks, previews, chunking."""

from .sliding import IGNORE_INDEX, PlanStats, SlidingWindows, Window, WindowPlan

__all__ = ["IGNORE_INDEX", "PlanStats", "SlidingWindows", "Window", "WindowPlan"]
