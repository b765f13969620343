"""Vector envs: Serial, Multiprocessing and Ray backends behind one ``make``."""
from puffer_core.vector.serial import Serial
