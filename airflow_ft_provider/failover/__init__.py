"""The pure failover core: pipeline graph, pipelined regions, failover and restart strategies.

Nothing here imports Airflow, Spark or boto3; the adapters in the rest of the package stand on it.
"""

from .clock import Clock, ManualClock, SystemClock
from .durations import format_duration, parse_duration
from .exponential_delay import ExponentialDelayRestartStrategy
from .failover_strategies import (
    FAILOVER_STRATEGY_KEY,
    FailoverStrategy,
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    failover_strategy_name,
    load_failover_strategy,
)
from .graph import DistributionPattern, ResultPartitionType, StageGraph
from .regions import pipelined_regions
from .restart_config import KNOWN_KEYS as RESTART_STRATEGY_KEYS
from .restart_config import DeprecatedConfigKeyWarning, load_restart_strategy, restart_strategy_type
from .restart_strategies import (
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    RestartStrategy,
)

__all__ = [
    "FAILOVER_STRATEGY_KEY",
    "RESTART_STRATEGY_KEYS",
    "Clock",
    "DeprecatedConfigKeyWarning",
    "DistributionPattern",
    "ExponentialDelayRestartStrategy",
    "FailoverStrategy",
    "FailureRateRestartStrategy",
    "FixedDelayRestartStrategy",
    "ManualClock",
    "NoRestartStrategy",
    "RestartAllFailoverStrategy",
    "RestartPipelinedRegionFailoverStrategy",
    "RestartStrategy",
    "ResultPartitionType",
    "StageGraph",
    "SystemClock",
    "failover_strategy_name",
    "format_duration",
    "load_failover_strategy",
    "load_restart_strategy",
    "parse_duration",
    "pipelined_regions",
    "restart_strategy_type",
]
