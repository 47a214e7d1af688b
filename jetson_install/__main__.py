from jetson_install.cli import main

main()
