"""Where things are, for tests in any folder."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
TEST_DATA = ROOT / "tests" / "data"
