from appsettings import Settings, load_settings


def test_defaults():
    assert load_settings({}) == Settings()


def test_a_port_from_the_environment_is_a_number():
    assert load_settings({"APP_PORT": "8080"}).port == 8080


def test_a_host_from_the_environment():
    assert load_settings({"APP_HOST": "0.0.0.0"}).host == "0.0.0.0"
