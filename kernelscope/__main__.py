from kernelscope.cli import exit_now, main

main()  # errors exit through sys.exit with their message
exit_now()
