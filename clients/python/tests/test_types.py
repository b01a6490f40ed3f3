"""The hand-written dataclasses against api/openapi.json's schemas, and the
package's version against pyproject.toml."""

import dataclasses
import json
import os
import re
import unittest

import timerq_client
from timerq_client import CancelJob, EpochBumped, FireEvent, NewTimer, OwnerState, Timer, TimerPage

HERE = os.path.dirname(os.path.abspath(__file__))
CONTRACT = os.path.join(HERE, "..", "..", "..", "api", "openapi.json")


class Contract(unittest.TestCase):
    """A property the contract adds to a schema must be a field here (or
    NewTimer cannot send it; Timer keeps unknown ones in extra, but should
    name them)."""

    @classmethod
    def setUpClass(cls):
        with open(CONTRACT, encoding="utf-8") as f:
            cls.schemas = json.load(f)["components"]["schemas"]

    def fields(self, cls):
        return {f.name.rstrip("_") for f in dataclasses.fields(cls)}

    def test_every_property_is_a_field(self):
        for cls, schema in [(Timer, "Timer"), (FireEvent, "FireEvent"), (TimerPage, "TimerPage"), (NewTimer, "NewTimer"),
                            (CancelJob, "CancelJob"), (OwnerState, "OwnerState"), (EpochBumped, "EpochBumped")]:
            with self.subTest(schema):
                missing = set(self.schemas[schema]["properties"]) - self.fields(cls)
                self.assertFalse(missing, f"api/openapi.json's {schema} has {sorted(missing)}, which {cls.__name__} lacks")


class Version(unittest.TestCase):
    def test_version_is_pyprojects(self):
        with open(os.path.join(HERE, "..", "pyproject.toml"), encoding="utf-8") as f:
            m = re.search(r'(?m)^version = "([^"]+)"$', f.read())
        self.assertIsNotNone(m)
        self.assertEqual(timerq_client.__version__, m.group(1))


if __name__ == "__main__":
    unittest.main()
