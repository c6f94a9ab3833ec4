"""Testing kit for users of the framework: ``FakeClient`` (an in-memory ``ClientProtocol``), a
``FakeClock``, in-memory informers and Leases, and ``eventually`` for polling assertions."""

from manager.testing.clock import FakeClock
from manager.testing.eventually import eventually
from manager.testing.informers import FakeInformer, FakeInformers
from manager.testing.leases import FakeLeases

__all__ = ["FakeClock", "FakeInformer", "FakeInformers", "FakeLeases", "eventually"]
