"""Sign-up with admin approval (SPEC ACC1) on NativeAuthenticator, plus a first admin without a browser."""

from __future__ import annotations

from nativeauthenticator import NativeAuthenticator
from traitlets import Unicode


class TiAuthenticator(NativeAuthenticator):
    """NativeAuthenticator whose first admin can be created at start-up.

    New accounts sign up at /hub/signup and cannot log in until an admin authorizes them at
    /hub/authorize (``open_signup`` stays False).
    """

    initial_admin_password = Unicode(
        "",
        config=True,
        help="""Password for the first admin, created at start-up if that account does not exist yet.

        Leave empty to have the admin sign up at /hub/signup (admins are authorized at once).
        ti-hub sets it from the TI_HUB_ADMIN_PASSWORD environment variable; it is never logged.""",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.initial_admin_password:
            for admin in sorted(self.admin_users):
                if not self.user_exists(admin):
                    if self.create_user(admin, self.initial_admin_password) is None:
                        self.log.error("Could not create the first admin %r: password too weak or name invalid", admin)
                    else:
                        self.log.info("Created the first admin account %r", admin)


class _NoStats:
    """JupyterHub 6 dropped statsd; NativeAuthenticator 1.3's login handler still times itself with it."""

    def timer(self, *_a, **_k):
        return self

    def start(self):
        return self

    def stop(self, *_a, **_k):
        return None

    def incr(self, *_a, **_k):
        return None


def _compat_login_handler():
    from nativeauthenticator.handlers import LoginHandler as NativeLogin

    class LoginHandler(NativeLogin):
        statsd = _NoStats()

        def _render(self, login_error=None, username=None, **_kwargs):
            # JupyterHub 6 passes extra keywords (sync=...) when it renders errors through this handler
            return super()._render(login_error=login_error, username=username)

    return LoginHandler


def _patched_handlers(self, app):
    handlers = NativeAuthenticator.get_handlers(self, app)
    login = _compat_login_handler()
    return [(path, login if path == r"/login" else h) for path, h in handlers]


TiAuthenticator.get_handlers = _patched_handlers
