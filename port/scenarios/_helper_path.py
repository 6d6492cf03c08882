"""Put port/work/helper-<python version>/ (where build.sh compiles porthelper) on sys.path."""
import os
import platform
import sys

HELPER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "work", "helper-" + platform.python_version())
sys.path.insert(0, HELPER_DIR)
