"""`pip install ./python` works offline: pip, told to use no package index,
builds the wheel with the package's own backend (python/_build) and
installs it into a temporary --target, from the source folder (pure
Python) and from the build tree's staged copy (with libringmaster_shim.so
beside the package); the installed package then imports and, from the
staged copy, finds its library."""

import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("RINGMASTER_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
STAGE = os.environ.get("RINGMASTER_PYTHON_STAGE", "")


class PipInstall(unittest.TestCase):
    def install(self, folder):
        target = tempfile.mkdtemp(prefix="rm_pip_")
        self.addCleanup(subprocess.run, ["rm", "-rf", target])
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index",
                            "--target", target, folder],
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return target, env

    def imported(self, target, env, code):
        env = dict(env, PYTHONPATH=target)
        env.pop("RINGMASTER_SHIM_LIBRARY", None)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                           text=True, env=env, cwd=target, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def test_source_folder_installs_offline(self):
        target, env = self.install(os.path.join(SOURCE, "python"))
        where = self.imported(target, env, "import ringmaster, ringmaster.torch."
                              "sampler; print(ringmaster.__file__)")
        self.assertTrue(where.startswith(target), where)
        self.assertFalse(os.path.exists(os.path.join(target, "ringmaster",
                                                     "libringmaster_shim.so")))

    def test_staged_copy_installs_with_its_library(self):
        if not STAGE:
            self.skipTest("RINGMASTER_PYTHON_STAGE not set (ctest sets it)")
        target, env = self.install(STAGE)
        lib = self.imported(target, env,
                            "import ringmaster; print(ringmaster.library_path())")
        self.assertEqual(lib, os.path.join(target, "ringmaster",
                                           "libringmaster_shim.so"))


if __name__ == "__main__":
    unittest.main()
