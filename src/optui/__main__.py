from optui.cli import main

main()
