"""The ti service's recurring work beside the scheduler, each a loop or a health subscriber the process shell starts:
device-hours accounting and the cluster usage it reads back, the idle policy, notices by mail, volume usage and
volume snapshots."""
