"""The SSH gateway ``ti-ssh`` (SPEC DEV4, WS3): ``ssh -p PORT user[+workspace|+job[.N]]@host``.

Pure cores: ``logins`` (login names, which target, the command to copy), ``ratelimit`` (failed-login token
buckets), ``authkeys`` (key matching), ``places`` (where a target runs, session argv and environment), the frame
codecs in ``kube``. I/O shells: ``lookup`` (ti service, hub database), ``local`` and ``proc`` (processes in a
local workspace's sandbox), ``kube`` (pod exec and port-forward), ``server``/``session``/``forward`` (asyncssh),
``app`` (the service's entry point), ``sftpchild`` (SFTP inside the sandbox). Settings: ``settings``.
Importing this package loads no SSH library.
"""
