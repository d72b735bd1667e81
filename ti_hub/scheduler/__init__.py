"""The scheduler: a pure core (snapshot in, decisions out) driven by the live loop and the simulator."""
