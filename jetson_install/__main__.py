from jetson_install.cli.main import main

main()
