"""A free loopback port for the programs a test starts, shared by the Python tests.

The port is chosen at random below the kernel's ephemeral range (ip_local_port_range), as
tests/integration/prometheus_support.hpp's free_port() does for the C++ tests: a port of that
range, which binding port 0 gives, can become the local port of any client's connection (a
Prometheus scraping, another test's HTTP client) before the program it was given binds it.
Below the range only another caller of this function can take it.
"""
import random
import socket

FLOOR = 10000


def ephemeral_low():
    """The first port of the range connect() takes local ports from (Linux's default: 32768)."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port):
    """Whether loopback `port` can be bound now (no SO_REUSEADDR: TIME_WAIT counts as taken)."""
    with socket.socket() as s:
        try:
            s.bind(('127.0.0.1', port))
            return True
        except OSError:
            return False


def free_port():
    """A loopback port that was free a moment ago."""
    low = ephemeral_low()
    if low > FLOOR + 1000:
        rng = random.SystemRandom()
        for _ in range(200):
            port = rng.randrange(FLOOR, low)
            if bindable(port):
                return port
    with socket.socket() as s:  # no room below the range: any port the kernel gives
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
