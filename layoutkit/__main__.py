from layoutkit.cli import app

app(prog_name="layoutkit")
