"""The app's widgets, one module each; none of them imports torch or a model."""

from tui_decode.widgets.app_footer import AppFooter
from tui_decode.widgets.details import DetailContext
from tui_decode.widgets.gamma_plot import GammaPlot
from tui_decode.widgets.iteration_detail import IterationDetail
from tui_decode.widgets.iteration_table import IterationTable
from tui_decode.widgets.params_pane import ParamsPane
from tui_decode.widgets.prompt_pane import PromptEditor, PromptPane
from tui_decode.widgets.stats_pane import StatsPane
from tui_decode.widgets.status_line import StatusLine
from tui_decode.widgets.token_stream import TokenStream, legend_markup
from tui_decode.widgets.value_editor import ValueEditor

__all__ = [
    "AppFooter",
    "DetailContext",
    "GammaPlot",
    "IterationDetail",
    "IterationTable",
    "ParamsPane",
    "PromptEditor",
    "PromptPane",
    "StatsPane",
    "StatusLine",
    "TokenStream",
    "ValueEditor",
    "legend_markup",
]
