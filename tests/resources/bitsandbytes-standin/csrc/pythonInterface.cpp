extern "C" int cget_version() { return 4902; }
