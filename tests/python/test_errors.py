"""Failures a user of the Python package can read: a missing shim library
named with the variable that pointed to it, a coordinator where nothing
listens reported at once (on stderr) and named in the error, the
membership timeout set from the environment or init(), and docstrings on
the public API (what help() shows)."""

import os
import pydoc
import socket
import subprocess
import sys
import textwrap
import time
import unittest

from harness import require_torch


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_python(code: str, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, env=e,
                          timeout=timeout)


class LibraryTest(unittest.TestCase):
    def test_a_missing_library_names_the_variable_and_the_path(self):
        missing = "/nonexistent/dir/libringmaster_shim.so"
        r = run_python("""
            import ringmaster
            try:
                ringmaster.Shim("127.0.0.1:1", "j", "w", 1)
            except ringmaster.ShimError as e:
                print("ShimError:", e)
            """, env={"RINGMASTER_SHIM_LIBRARY": missing})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ShimError: RINGMASTER_SHIM_LIBRARY=", r.stdout)
        self.assertIn(missing, r.stdout)
        self.assertIn("no such file", r.stdout)

    def test_at_torch_init_too(self):
        require_torch(self)
        missing = "/nonexistent/libringmaster_shim.so"
        r = run_python("""
            import ringmaster, ringmaster.torch as rmt
            try:
                rmt.init(coordinator="127.0.0.1:1", job="j", worker="w",
                         desired_workers=1, backend="gloo")
            except ringmaster.ShimError as e:
                print("ShimError:", e)
            """, env={"RINGMASTER_SHIM_LIBRARY": missing})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"RINGMASTER_SHIM_LIBRARY={missing!r}", r.stdout)


class UnreachableCoordinatorTest(unittest.TestCase):
    def test_nothing_listening_is_logged_at_once_and_named(self):
        address = f"127.0.0.1:{free_port()}"
        start = time.monotonic()
        r = run_python(f"""
            import ringmaster
            s = ringmaster.Shim({address!r}, "j", "w0", 1)
            print("timeout", s.membership_timeout)
            try:
                s.start()
            except ringmaster.ShimError as e:
                print("ShimError:", e)
            """, env={"RINGMASTER_MEMBERSHIP_TIMEOUT": "3"})
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("timeout 3.0", r.stdout)
        self.assertIn(f"ShimError: UNAVAILABLE: never reached the coordinator "
                      f"at {address} within 3 s: connection refused",
                      r.stdout)
        self.assertNotIn("no generation", r.stdout)
        # The shim's log line, on the worker's stderr, from the first try.
        self.assertIn("level=error msg=\"coordinator unreachable\" "
                      f"address={address}", r.stderr)
        self.assertIn("reason=\"connection refused\"", r.stderr)
        self.assertLess(took, 30)

    def test_init_takes_the_membership_timeout(self):
        require_torch(self)
        address = f"127.0.0.1:{free_port()}"
        r = run_python(f"""
            import datetime, ringmaster, ringmaster.torch as rmt
            try:
                rmt.init(coordinator={address!r}, job="j", worker="w",
                         desired_workers=1, backend="gloo",
                         membership_timeout=datetime.timedelta(seconds=1.5))
            except ringmaster.ShimError as e:
                print("ShimError:", e)
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"never reached the coordinator at {address} within "
                      f"1.5 s", r.stdout)

    def test_a_bad_timeout_variable_is_named(self):
        r = run_python("""
            import ringmaster
            try:
                ringmaster.Shim("127.0.0.1:1", "j", "w", 1)
            except ringmaster.ShimError as e:
                print("ShimError:", e)
            """, env={"RINGMASTER_MEMBERSHIP_TIMEOUT": "soon"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("RINGMASTER_MEMBERSHIP_TIMEOUT='soon'", r.stdout)


class DocstringTest(unittest.TestCase):
    def test_the_public_api_has_docstrings(self):
        require_torch(self)
        import ringmaster.torch as rmt
        public = {
            "init": rmt.init,
            "shutdown": rmt.shutdown,
            "allreduce_": rmt.allreduce_,
            "elastic.run": rmt.elastic.run,
            "ElasticState": rmt.ElasticState,
            "ElasticState.commit": rmt.ElasticState.commit,
            "ElasticState.check_host_updates":
                rmt.ElasticState.check_host_updates,
            "ElasticState.restore": rmt.ElasticState.restore,
            "ElasticSampler": rmt.ElasticSampler,
            "ElasticSampler.state_dict": rmt.ElasticSampler.state_dict,
            "rank": rmt.rank,
            "world_size": rmt.world_size,
            "generation": rmt.generation,
        }
        missing = [name for name, obj in public.items()
                   if not (obj.__doc__ or "").strip()]
        self.assertEqual(missing, [], "no docstring")
        # help() shows them: the timeout and how to change it, at init.
        text = pydoc.render_doc(rmt.init, renderer=pydoc.plaintext)
        self.assertIn("60 s", text)
        self.assertIn("RINGMASTER_MEMBERSHIP_TIMEOUT", text)
        self.assertIn("membership_timeout", text)
        # The class's own docstring, not object's inherited one.
        self.assertIn("membership changes",
                      pydoc.render_doc(rmt.ElasticState,
                                       renderer=pydoc.plaintext))
        self.assertIn("step_samples", rmt.ElasticSampler.__doc__)


if __name__ == "__main__":
    unittest.main()
