"""Small OS helpers that several TiHub processes use (launcher, hub, ti service, SSH gateway, `ti` CLI), so they
belong to none of them: children die with their parent (children.py); files written whole and secrets made once
(secretfile.py); a process named by its pid file, never one that took its pid over (pidfile.py), and what an
earlier `ti-hub start` left, found and stopped in order by the launcher and by the hub (lastrun.py)."""
