"""Sliding, semantic and multi-scale windows over token ids; coverage checks, previews, chunking."""

from .coverage import CoverageReport, coverage_report
from .multiscale import MultiScaleWindows
from .sliding import IGNORE_INDEX, PlanStats, SlidingWindows, Window, WindowPlan

__all__ = ["IGNORE_INDEX", "CoverageReport", "MultiScaleWindows", "PlanStats", "SlidingWindows", "Window",
           "WindowPlan", "coverage_report"]
