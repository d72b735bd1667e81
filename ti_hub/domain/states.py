"""Job states (SPEC JOB3) and which of them hold resources or count against quota."""

CREATED, QUEUED, SCHEDULING, RUNNING = "created", "queued", "scheduling", "running"
PAUSING, PAUSED, KILLING, KILLED = "pausing", "paused", "killing", "killed"
COMPLETED, FAILED, ERROR, STOPPED = "completed", "failed", "error", "stopped"

ALL = (CREATED, QUEUED, SCHEDULING, RUNNING, PAUSING, PAUSED, KILLING, KILLED, COMPLETED, FAILED, ERROR, STOPPED)
# counted against quota: asked for or holding resources
ACTIVE = frozenset({QUEUED, SCHEDULING, RUNNING, PAUSING, KILLING})
# holding devices on a node right now
HOLDING = frozenset({SCHEDULING, RUNNING, PAUSING, KILLING})
FINAL = frozenset({KILLED, COMPLETED, FAILED, ERROR, STOPPED})
# SPEC JOB5: the states in which other users' jobs are listed (as a summary), to holders of jobs:view-all
SHOWN_TO_OTHERS = frozenset({QUEUED, SCHEDULING, PAUSED})
KINDS = ("workspace", "single", "distributed")
JOB_KINDS = ("single", "distributed")
