"""What the tests share: fake servers for faults the real engine cannot show, the scenario
settings, the browser and watch helpers, the loopback Ray cluster."""
