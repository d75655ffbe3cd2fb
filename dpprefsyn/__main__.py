from dpprefsyn.cli import app

app(prog_name="dpprefsyn")
