"""Sliding, semantic and multi-scale windows over token ids; coverage checks, previews, chunking.

Plans are arrays computed from document lengths (:class:`SlidingWindows`, :class:`MultiScaleWindows`)
or from text units (:class:`SemanticWindows`); tokens are cut only when a plan is materialized.
"""

from .chunking import Chunk, ContextPiece, assemble_context, bm25_scores, chunk_text
from .coverage import CoverageReport, coverage_report
from .multiscale import MultiScaleWindows
from .preview import WindowPreview, preview
from .semantic import SemanticPlan, SemanticWindows
from .sliding import PlanStats, SlidingWindows, Window, WindowPlan

__all__ = ["Chunk", "ContextPiece", "CoverageReport", "MultiScaleWindows", "PlanStats",
           "SemanticPlan", "SemanticWindows", "SlidingWindows", "Window", "WindowPlan", "WindowPreview",
           "assemble_context", "bm25_scores", "chunk_text", "coverage_report", "preview"]
