from gradguard.cli import run

run()
